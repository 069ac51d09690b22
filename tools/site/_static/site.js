// The course site's own script (loaded deferred on every page, tools/site/conf.py): what the
// pages do beyond the theme and the views.
