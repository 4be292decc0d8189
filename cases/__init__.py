"""Built-in kb cases (Markdown files, one folder per category); shipped in the wheel as data."""
