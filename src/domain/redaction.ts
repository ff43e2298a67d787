/** A driver's message with the URL's password taken out, should a driver ever echo it. */
export function withoutPassword(message: string, url: string): string {
  const password = URL.parse(url)?.password;
  if (!password) return message;
  let decoded = password;
  try {
    decoded = decodeURIComponent(password);
  } catch {
    // not percent-encoded text: the raw form is all there is to take out
  }
  return message.replaceAll(password, '***').replaceAll(decoded, '***');
}
