"""The report's sections, each with its view, figures and template part in one place (a section that has a
template part is a folder: quality/, sweep/)."""
