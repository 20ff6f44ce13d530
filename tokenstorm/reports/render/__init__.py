"""Rendering a judged run: the HTML page (report.html.j2), the plots every section draws with, the console block
and JUnit XML."""
