// An independent Negentropy V1 initiator (nostr-tools' NIP-77 port), driven
// by the interop tests. Line 1 of stdin: {"items": [[timestamp, hexId]...],
// "frame": N, "url": optional}. With a url, each message is POSTed there and
// the reply read back; without, each message is written as a hex line and
// the reply read as the next stdin line. Ends with one line:
// DONE {"have": [...], "need": [...], "rounds": n}.
import * as readline from 'node:readline'
import { Negentropy, NegentropyStorageVector } from './node_modules/nostr-tools/lib/esm/nip77.js'

const input = readline.createInterface({ input: process.stdin })
const lines = input[Symbol.asyncIterator]()
const nextLine = async () => (await lines.next()).value
const setup = JSON.parse(await nextLine())

const storage = new NegentropyStorageVector()
for (const [timestamp, id] of setup.items) storage.insert(timestamp, id)
storage.seal()
const client = new Negentropy(storage, setup.frame)

async function exchange(message) {
  if (!setup.url) {
    process.stdout.write(message + '\n')
    return await nextLine()
  }
  const response = await fetch(setup.url, {
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream' },
    body: Buffer.from(message, 'hex'),
  })
  if (response.status !== 200) throw Error(`HTTP ${response.status}: ${await response.text()}`)
  return Buffer.from(await response.arrayBuffer()).toString('hex')
}

const have = []
const need = []
let message = client.initiate()
let rounds = 0
while (message !== null) {
  rounds += 1
  const reply = await exchange(message)
  message = client.reconcile(reply, (id) => have.push(id), (id) => need.push(id))
}
// no process.exit: it would cut a long line still being written to the pipe
process.stdout.write('DONE ' + JSON.stringify({ have, need, rounds }) + '\n')
input.close()
