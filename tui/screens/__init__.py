"""Screens of the kb app."""
