"""docs/readthedocs"""
