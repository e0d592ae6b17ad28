-- recorded_settings: the variables of the recorded environments (recorded_env) that a reader
-- of the diagnosis should see (store/launch_settings.yaml): those that change what the
-- capture shows, and the knobs of the run.
--
-- process: nsys's index of the launched process.
-- name: the variable.
-- value: its value.
-- kind: distorts (the capture's numbers are not those of a normal run), distorts-startup (only
--   start-up's) or knob.
-- effect: what it did, in words.
-- reference: the documentation of the variable.
CREATE VIEW recorded_settings AS
SELECT e.process, e.name, e.value, s.kind, s.effect, s.reference
FROM recorded_env e
JOIN launch_settings_t s ON s.name = e.name AND regexp_full_match(e.value, s.value, 'i')
ORDER BY s.kind = 'knob', s.kind, e.process, e.name;
