"""One description of a fit, and the number formats, shared by the CLI text, the report and the figures."""
