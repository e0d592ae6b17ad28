-- The GPUs whose MoE layers pick their experts on the host (moe_layers.host_routed), found once:
-- steady_gaps, a view that many rules read, asks this instead of planning moe_layers each time.
CREATE TABLE moe_host_routed_t AS SELECT device_id FROM moe_layers WHERE host_routed;
