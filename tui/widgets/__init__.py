"""Widgets of the kb app."""
