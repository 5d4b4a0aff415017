"""Charter, a rules service that decides what AI agents may do.

The distribution's version lives here, once: the build reads it for the wheel's
metadata, and `charter --version` prints it.
"""

from __future__ import annotations

__version__ = "0.1.0"
