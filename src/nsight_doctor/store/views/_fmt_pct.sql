-- fmt_pct(pct): a percentage (0-100) as the reports print one ("7.3%", "41%"; 'n/a' when
-- NULL), for the shares a rule writes into its own evidence text: they then read as the
-- {x:pct} of its templates do (docs/writing-rules.md).
CREATE MACRO fmt_pct(pct) AS CASE
    WHEN pct IS NULL THEN 'n/a'
    WHEN abs(pct) < 10 THEN printf('%.1f%%', pct::DOUBLE)
    ELSE printf('%.0f%%', pct::DOUBLE)
END;
