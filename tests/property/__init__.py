"""Property (hypothesis) tests of Charter's core guarantees; see docs/properties.md."""
