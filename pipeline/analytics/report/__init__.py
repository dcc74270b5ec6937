"""The HTML report (``botstats report``): the page (``_report``), its sections (``_sections``),
their charts (``_charts``), bot names as shown (``_names``) and resource health (``_health``);
the page's template, script and the charting library are in ``assets/``."""
