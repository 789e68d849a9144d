/** `npm run docs:config`: writes docs/configuration.md from the configuration's zod schemas (tools/config-reference.ts). */
import { writeFileSync } from 'node:fs';
import { configurationReference, undocumented } from '../tools/config-reference';

const missing = undocumented();
if (missing.length > 0) {
  console.error(`No description (add .describe() to the schema):\n  ${missing.join('\n  ')}`);
  process.exitCode = 1;
}
writeFileSync(new URL('../docs/configuration.md', import.meta.url), configurationReference());
console.log('docs/configuration.md written');
