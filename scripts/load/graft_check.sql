SELECT exact FROM kvg_graft_check(:artifact, ' there was a little girl');
