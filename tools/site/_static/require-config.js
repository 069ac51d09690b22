// Where require.js finds anywidget's module (served from _static/), so that the widget renderer
// never looks for it on a CDN; and the widget renderer's own modules (@jupyter-widgets/base,
// /controls, /html-manager/dist/...), whose address webpack takes as the folder of the
// Font Awesome files it loads for a spinner or an icon: _static/html-manager/, where they are.
(() => {
  const root = document.documentElement.dataset.content_root + "_static/";
  require.config({ paths: { anywidget: root + "anywidget/index",
                            "@jupyter-widgets": root + "html-manager",
                            "@jupyter-widgets/html-manager/dist": root + "html-manager" } });
})();
