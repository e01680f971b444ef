-- kvg 0.2.0 -> 0.3.0. CREATE EXTENSION kvg runs kvg--0.1.0.sql and then each
-- upgrade script in order, so a new installation and an upgraded one are the
-- same schema by construction. Each feature adds its own section below.

\echo Use "ALTER EXTENSION kvg UPDATE TO '0.3.0'" to load this file. \quit
