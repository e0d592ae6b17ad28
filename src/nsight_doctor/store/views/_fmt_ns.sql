-- fmt_ns(ns): a duration in ns as the reports print one ("2.10 s", "12.3 ms", "401.8 µs",
-- "850 ns"; 'n/a' when NULL), for the durations a rule writes into its own evidence text: they
-- then read as the {x:ns} of its templates do (docs/writing-rules.md).
CREATE MACRO fmt_ns(ns) AS CASE
    WHEN ns IS NULL THEN 'n/a'
    WHEN abs(ns) >= 1e9 THEN printf('%.2f s', ns / 1e9)
    WHEN abs(ns) >= 1e6 THEN printf('%.1f ms', ns / 1e6)
    WHEN abs(ns) >= 1e3 THEN printf('%.1f µs', ns / 1e3)
    ELSE printf('%.0f ns', ns::DOUBLE)
END;
