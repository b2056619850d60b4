import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./app";
import { startSessionWatch } from "./session";
import "./styles.css";

startSessionWatch();
createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
