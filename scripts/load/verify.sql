SELECT kvg_artifact_verify(:artifact);
