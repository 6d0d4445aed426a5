-- Run after the views exist: from here on the connection reads only the committed files
-- (allowed_paths, set just before), cannot load extensions and cannot change settings.
SET autoinstall_known_extensions = false;
SET autoload_known_extensions = false;
SET python_enable_replacements = false;
SET enable_external_access = false;
SET lock_configuration = true;
