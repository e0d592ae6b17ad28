-- Helpers shared by the views (not documented as views).
CREATE MACRO mem_kind_name(k) AS
    CASE k WHEN 0 THEN 'pageable' WHEN 1 THEN 'pinned' WHEN 2 THEN 'device'
        WHEN 3 THEN 'array' WHEN 4 THEN 'managed' WHEN 5 THEN 'device static'
        WHEN 6 THEN 'managed static' WHEN 7 THEN 'unknown' END;
