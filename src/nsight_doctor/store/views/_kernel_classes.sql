-- The category of each distinct kernel name (kernel_category, from the taxonomy in
-- store/kernel_categories.yaml), classified once: the kernel table can hold millions of rows.
CREATE TABLE kernel_classes_t AS
SELECT DISTINCT k.short_name_id, k.demangled_name_id, kernel_category(s.value, d.value) AS category
FROM base_kernels k
LEFT JOIN base_strings s ON s.id = k.short_name_id
LEFT JOIN base_strings d ON d.id = k.demangled_name_id;
