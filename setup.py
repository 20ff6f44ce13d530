"""Packaging that pyproject.toml cannot say (everything else is there): the wheel's
``tokenstorm/locustfiles/`` is built from the checkout's ``locustfiles/``.

One copy of the locustfiles serves both: ``locust -f locustfiles/mixed.py`` in a checkout (README's first
command, and the tests), ``tokenstorm run mixed`` where the wheel is installed. pyproject.toml's
``[tool.setuptools.packages.find]`` cannot add a package that lives outside its folder, so the package
list is found here, with the same patterns.
"""

from setuptools import find_namespace_packages, setup

#: the import packages of the wheel; every folder under them is one (templates and data included)
PACKAGES = ["tokenstorm", "workloads", "emulator", "monitors", "reports"]

setup(
    packages=[*find_namespace_packages(include=[p for name in PACKAGES for p in (name, f"{name}.*")],
                                       exclude=["*.__pycache__"]), "tokenstorm.locustfiles"],
    package_dir={"tokenstorm.locustfiles": "locustfiles"},
)  # fmt: skip
