// Vite's `?raw` imports (the tests load the real index.html as text).
declare module "*.html?raw" {
  const text: string;
  export default text;
}
