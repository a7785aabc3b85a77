"""Root conftest: the project's own tests use pytester (see pyproject addopts)."""
