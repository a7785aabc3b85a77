"""Text for people from the verifier's data: Markdown and a self-contained HTML page.

Modules: ``text`` (markers and wording shared by both formats), ``markdown`` (Markdown
primitives), ``comparison_markdown`` and ``comparison_html`` (``verifier compare``),
``charts`` (inline SVG interval charts), ``scorecard_markdown`` (``scorecard.md``).
Every function here is pure: data in, text out.
"""
