// The built-in basemap's colours in the page's theme (prefers-color-scheme), so a dark page does not
// frame a glaring map. The light sea colour is also what tests read to tell background from tiles.
const LIGHT = { sea: "#a9cfe0", land: "#f3efe4", border: "#b7ab93", coast: "#8fa9b4",
                dot: "#5b5347", label: "#2f2a22", halo: "rgba(255,255,255,0.9)" };
const DARK = { sea: "#1c3441", land: "#2b302d", border: "#6a6251", coast: "#456573",
               dot: "#c2b8a3", label: "#ece6d8", halo: "rgba(20,24,27,0.9)" };
export const darkScheme = typeof matchMedia === "function" ? matchMedia("(prefers-color-scheme: dark)") : null;
export const colours = () => (darkScheme && darkScheme.matches ? DARK : LIGHT);
