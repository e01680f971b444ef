SELECT length(kvg_export(:artifact));
