"""Plant runtime features the gateway runs: schedules (``[schedules.NAME]``), tag triggers
(``[triggers.NAME]``) and HMI command tags (``[command_tags.NAME]``). See docs/plant-features.md."""
