"""The answer-quality section: its view and template part."""
