"""The filer's own figures: the inline-XBRL facts of an HTML filing (``reader``), kept with the document
(``facts``), and the one a Matrix field asks for, for the document's own period (``concepts``).

May import: nothing of finspace (tests/test_imports.py).
"""
