// An async tool: awaits timers and Promise.all, logs through console.
async function execute(input) {
  const delays = input.delays || [30, 10, 20];
  const order = [];
  await Promise.all(
    delays.map(async (ms) => {
      await new Promise((resolve) => setTimeout(resolve, ms));
      order.push(ms);
    }),
  );
  console.log('finished in order', order.join(','));
  return { order, url: new URL('/a?b=1', 'https://example.test').href };
}
