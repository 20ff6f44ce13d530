"""The "Where the time went" section: its view, figure and template part."""
