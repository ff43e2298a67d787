/**
 * The typed client: create a pet (the client sends an Idempotency-Key and retries safely), then list
 * every pet, page after page. Run: PETSTORE_URL=... PETSTORE_KEY=... node examples/client.ts
 */
import { PetstoreClient, PetstoreError } from '../client/src/index.ts';

const client = new PetstoreClient({ baseUrl: process.env.PETSTORE_URL!, apiKey: process.env.PETSTORE_KEY! });

try {
  const pet = await client.createPet({ name: 'Pickle', categoryId: 2n, status: 'pending' });
  console.log(`created ${pet.id}: ${pet.name}`);
  for await (const each of client.listPets({ limit: 50 })) console.log(`${each.id}\t${each.name}\t${each.status}`);
} catch (err) {
  if (err instanceof PetstoreError) console.error(`${err.status} ${err.code}: ${err.message} (request ${err.requestId})`);
  throw err;
}
