"""The Directory (``_truth``): the service's state and the ground truth tests compare an archive
with, in parts, each a class the next one extends: the state and its clock (``_state``), bot and
user profiles found by id (``_profiles``), the listing and its churn (``_listing``), a bot's stat
records (``_stats``), users' bots, servers and webhooks (``_users``), tokens and API keys
(``_credentials``), then the ground truth (``_truth``)."""
