// A file tool: count the words of a file under a granted directory
// (needs `fs.readFile`).
function execute(input) {
  const text = fs.readFileSync(input.path, 'utf8');
  const words = text.split(/\s+/).filter(Boolean);
  return { path: input.path, words: words.length, first: words[0] };
}
