"""The package's version, in a module of its own: below everything that records it (provenance.py), and read by
the package's root (__init__.py) without importing the API."""
__version__ = "0.1.0"
