// Where require.js finds anywidget's module (served from _static/), so that the widget renderer
// never looks for it on a CDN; and the widget renderer's own modules, whose address webpack uses
// for the Font Awesome files beside it (_static/html-manager/*.woff2).
(() => {
  const root = document.documentElement.dataset.content_root + "_static/";
  require.config({ paths: { anywidget: root + "anywidget/index",
                            "@jupyter-widgets/html-manager/dist": root + "html-manager" } });
})();
