// One linter for the service, its tests, scripts, benchmarks, client and examples. Formatting is
// Prettier's job (.prettierrc.json), so eslint-config-prettier turns off every rule about layout.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import { defineConfig } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['dist/', 'assets/', 'client/dist/', 'client/src/schema.ts', 'coverage/', '.stryker-tmp/', 'reports/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      // An unused argument named with a leading underscore is a signature's placeholder, on purpose.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  { files: ['examples/**', 'client/**'], languageOptions: { globals: { ...globals.browser, ...globals.node } } },
  // Tests read answers off the wire, whose JSON is untyped until a test asserts its shape.
  { files: ['test/**'], rules: { '@typescript-eslint/no-explicit-any': 'off' } },
  prettier,
  // After Prettier's config, which turns it off: Prettier wraps code at this width but leaves long
  // comments and strings alone, and this catches those. The server command's first line names every
  // Node.js flag it runs with (src/cli/main.ts), and a first line cannot be wrapped.
  { rules: { 'max-len': ['error', { code: 140, ignoreUrls: true, ignoreRegExpLiterals: true, ignorePattern: '^#!' }] } },
  // A test's name and the raw requests it sends stay on one line, so each can be searched for whole.
  {
    files: ['test/**', 'bench/**'],
    rules: {
      'max-len': ['error', { code: 140, ignoreUrls: true, ignoreRegExpLiterals: true, ignoreStrings: true, ignoreTemplateLiterals: true }],
    },
  },
);
