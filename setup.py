"""Packaging that pyproject.toml cannot say (everything else is there): the wheel's
``tokenstorm/locustfiles/`` is built from the checkout's ``locustfiles/``, and its ``tokenstorm/slo/`` and
``tokenstorm/traces/`` (the example SLO files and trace sample ``tokenstorm examples DIR`` copies) from
``slo/`` and ``traces/``.

One copy of the locustfiles serves both: ``locust -f locustfiles/mixed.py`` in a checkout (README's first
command, and the tests), ``tokenstorm run mixed`` where the wheel is installed. pyproject.toml's
``[tool.setuptools.packages.find]`` cannot add a package that lives outside its folder, so the package
list is found here, with the same patterns.
"""

from setuptools import find_namespace_packages, setup

#: the wheel's one import package; every folder under it is a package (templates and data included)
PACKAGES = ["tokenstorm"]
#: folders of the checkout the wheel holds inside the tokenstorm package: name there -> folder here
BUNDLED = {"tokenstorm.locustfiles": "locustfiles", "tokenstorm.slo": "slo", "tokenstorm.traces": "traces"}

setup(
    packages=[*find_namespace_packages(include=[p for name in PACKAGES for p in (name, f"{name}.*")],
                                       exclude=["*.__pycache__"]), *BUNDLED],
    package_dir=BUNDLED,
)  # fmt: skip
