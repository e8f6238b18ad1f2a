"""What the tests share: each module a kind of helper, imported by the tests and by tests/conftest.py, which
keeps only fixtures. No test imports another test module or the conftest."""
