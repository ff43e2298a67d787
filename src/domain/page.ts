/** The list operation's page size: how many pets a page holds when the client does not say, and at most. */
export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;
