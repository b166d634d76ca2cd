"""Reports shared by the command line, the card and compare."""
