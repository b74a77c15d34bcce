"""PackagePlan → files. Templates see only plain data built in ``context.py``."""
