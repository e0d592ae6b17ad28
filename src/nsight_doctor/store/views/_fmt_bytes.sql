-- fmt_bytes(bytes): a size as the reports print one ("377.5 MB", "3.1 GB", "850 B"; powers of
-- 1,000; 'n/a' when NULL), for the sizes a rule writes into its own evidence text: they then
-- read as the {x:bytes} of its templates do (docs/writing-rules.md).
CREATE MACRO fmt_bytes(b) AS CASE
    WHEN b IS NULL THEN 'n/a'
    WHEN abs(b) < 1e3 THEN printf('%.0f B', b::DOUBLE)
    WHEN abs(b) < 1e6 THEN printf('%.1f KB', b / 1e3)
    WHEN abs(b) < 1e9 THEN printf('%.1f MB', b / 1e6)
    WHEN abs(b) < 1e12 THEN printf('%.1f GB', b / 1e9)
    ELSE printf('%.1f TB', b / 1e12)
END;
