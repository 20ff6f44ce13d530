"""The sweep section: per-level measures, the knee, its figures and template part."""
