-- The category of each distinct kernel name (kernel_category, from the taxonomy in
-- store/kernel_categories.yaml), classified once: the kernel table can hold millions of rows,
-- so the distinct name pairs are found first and only they are classified. Each pair's names
-- are kept beside its category: the kernels view then joins this one small table, not the
-- strings twice more (half its cost at 2 M kernels, paid by every rule that reads it).
CREATE TABLE kernel_classes_t AS
WITH ids AS (
    SELECT DISTINCT short_name_id, demangled_name_id FROM base_kernels
)
SELECT i.short_name_id, i.demangled_name_id, s.value AS name, d.value AS demangled_name,
       kernel_category(s.value, d.value) AS category
FROM ids i
LEFT JOIN base_strings s ON s.id = i.short_name_id
LEFT JOIN base_strings d ON d.id = i.demangled_name_id;
