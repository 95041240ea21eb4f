// The API reference at /docs: Swagger UI reading /openapi.json, every
// file served by `sluice serve` itself (no CDN: DTNs are often
// air-gapped).
//
// Third-party: swagger-ui-dist 5.36.0 (https://github.com/swagger-api/swagger-ui),
// Apache License 2.0 (LICENSE.swagger-ui and NOTICE.swagger-ui beside
// this file; the licences of what its bundle holds in
// swagger-ui-bundle.js.LICENSE.txt), committed as swagger-ui-bundle.js
// and swagger-ui.css from the npm package.
"use strict";
(function () {
  const ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    // Swagger UI's default sends the document to validator.swagger.io
    // for a badge: nothing may leave the machine.
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    docExpansion: "list",
    defaultModelsExpandDepth: 0,
    onComplete: () => {
      // Signed in to the dashboard in this tab: "Try it out" sends the
      // same token (it stays in this tab's session storage).
      const token = sessionStorage.getItem("sluice.token");
      if (token) {
        ui.authActions.authorize({ bearer: { name: "bearer", schema: { type: "http", scheme: "bearer" }, value: token } });
      }
    },
  });
  window.ui = ui;
})();
