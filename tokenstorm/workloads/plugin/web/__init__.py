"""The web UI: tokenstorm's tabs, the live view, and the window of recent records behind it."""
